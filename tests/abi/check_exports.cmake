# Every plugin exports exactly its entry symbol (nm -D --defined-only).
#
#   cmake -DNM=<nm> -DDIRS="<dir>;<dir>..." [-DREQUIRED="a.so;b.so"]
#         [-DEXPECT_NONE="name.so;..."] -P check_exports.cmake
#
# Checks every *.so in DIRS. REQUIRED names files that must be among them (so
# the check cannot pass on an empty folder); EXPECT_NONE names fixtures that
# deliberately export nothing (a misspelt entry the version script hides).
cmake_minimum_required(VERSION 3.20)
if(NOT NM OR NOT DIRS)
  message(FATAL_ERROR "usage: cmake -DNM=nm -DDIRS=dir;... -P check_exports.cmake")
endif()

set(plugins "")
foreach(dir ${DIRS})
  file(GLOB found "${dir}/*.so")
  list(APPEND plugins ${found})
endforeach()
list(SORT plugins)

set(names "")
foreach(plugin ${plugins})
  get_filename_component(name "${plugin}" NAME)
  list(APPEND names "${name}")
endforeach()
foreach(required ${REQUIRED})
  if(NOT required IN_LIST names)
    message(FATAL_ERROR "FAIL ${required}: not found in ${DIRS} (build it first)")
  endif()
endforeach()

set(failures 0)
foreach(plugin ${plugins})
  get_filename_component(name "${plugin}" NAME)
  execute_process(COMMAND ${NM} -D --defined-only "${plugin}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message("FAIL ${name}: nm failed: ${err}")
    math(EXPR failures "${failures} + 1")
    continue()
  endif()
  # "ADDRESS TYPE NAME" per line; keep the names.
  string(REGEX MATCHALL "[^\n]+" lines "${out}")
  set(symbols "")
  foreach(line ${lines})
    string(REGEX REPLACE "^.* " "" symbol "${line}")
    list(APPEND symbols "${symbol}")
  endforeach()
  if(name IN_LIST EXPECT_NONE)
    set(expected "")
  else()
    set(expected "tensorhost_plugin_entry")
  endif()
  if(NOT "${symbols}" STREQUAL "${expected}")
    string(REPLACE ";" " " shown "${symbols}")
    message("FAIL ${name}: exports [${shown}], expected [${expected}]")
    math(EXPR failures "${failures} + 1")
  else()
    message("PASS ${name}: exports [${expected}]")
  endif()
endforeach()
list(LENGTH plugins count)
if(failures GREATER 0)
  message(FATAL_ERROR "${failures} of ${count} plugins export the wrong symbols")
endif()
message("all ${count} plugins export exactly their entry symbol")
