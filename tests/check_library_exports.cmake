# libtensorhost exports exactly the functions its public header declares
# (TENSORHOST_API), each under the version node of the minor that added it:
# the names libtensorhost.map lists in a node of their own carry that node,
# every other the 1.0 node (nm -D --defined-only).
#
#   cmake -DNM=<nm> -DLIBRARY=<libtensorhost.so.1> -DHEADER=<tensorhost.h>
#         -DMAP=<libtensorhost.map> -P check_library_exports.cmake
cmake_minimum_required(VERSION 3.20)
foreach(var NM LIBRARY HEADER MAP)
  if(NOT ${var})
    message(FATAL_ERROR "usage: cmake -DNM=nm -DLIBRARY=... -DHEADER=... -DMAP=... "
                        "-P check_library_exports.cmake")
  endif()
endforeach()

# Declared: "TENSORHOST_API <type> [*]name(".
file(READ "${HEADER}" header)
string(REGEX MATCHALL "TENSORHOST_API[^;(]*[ *](tensorhost_[a-z0-9_]+)\\(" decls "${header}")
set(declared "")
foreach(decl ${decls})
  string(REGEX REPLACE ".*[ *](tensorhost_[a-z0-9_]+)\\($" "\\1" name "${decl}")
  list(APPEND declared "${name}")
endforeach()
list(LENGTH declared n_declared)
if(n_declared LESS 20)
  message(FATAL_ERROR "FAIL: only ${n_declared} TENSORHOST_API functions found in ${HEADER}")
endif()

# The node each name listed by name belongs to: "TENSORHOST_1.1 { global: a; b; } ...".
file(READ "${MAP}" map)
string(REGEX REPLACE "/\\*([^*]|\\*[^/])*\\*/" "" map "${map}")
string(REPLACE ";" " " map "${map}") # not a CMake list separator
string(REGEX MATCHALL "TENSORHOST_[0-9.]+[ \t\n]*{[^}]*}" nodes "${map}")
foreach(node ${nodes})
  string(REGEX MATCH "^TENSORHOST_[0-9.]+" version "${node}")
  string(REGEX MATCHALL "tensorhost_[a-z0-9_]+" listed "${node}")
  foreach(entry ${listed})
    set(node_of_${entry} ${version})
  endforeach()
endforeach()

execute_process(COMMAND ${NM} -D --defined-only "${LIBRARY}" OUTPUT_VARIABLE symbols
                RESULT_VARIABLE failed)
if(failed)
  message(FATAL_ERROR "FAIL: ${NM} -D --defined-only ${LIBRARY} failed")
endif()
string(REGEX MATCHALL "[A-Za-z] [A-Za-z0-9_.@]+\n" lines "${symbols}")
set(exported "")
set(status 0)
foreach(line ${lines})
  string(REGEX REPLACE "^[A-Za-z] ([^\n]*)\n$" "\\1" symbol "${line}")
  if(symbol MATCHES "^TENSORHOST_[0-9.]+$")
    continue() # the version nodes themselves
  endif()
  string(REGEX REPLACE "@.*" "" name "${symbol}")
  string(REGEX REPLACE "^[^@]*@+" "" version "${symbol}")
  list(APPEND exported "${name}")
  if(NOT name IN_LIST declared)
    message(SEND_ERROR "FAIL ${name}: exported but not declared in ${HEADER}")
    set(status 1)
  endif()
  set(want TENSORHOST_1.0)
  if(DEFINED node_of_${name})
    set(want ${node_of_${name}})
  endif()
  if(NOT version STREQUAL want)
    message(SEND_ERROR "FAIL ${name}: version '${version}', expected ${want}")
    set(status 1)
  endif()
endforeach()
foreach(name ${declared})
  if(NOT name IN_LIST exported)
    message(SEND_ERROR "FAIL ${name}: declared in ${HEADER} but not exported")
    set(status 1)
  endif()
endforeach()
list(LENGTH exported n_exported)
if(status EQUAL 0)
  message(STATUS "libtensorhost exports the header's ${n_exported} functions, each in its node")
endif()
