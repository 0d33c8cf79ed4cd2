# th_add_plugin(NAME <id> SOURCES ... [LIBRARIES ...] [OUTPUT_DIR dir] [NO_INSTALL])
#
# Every plugin of this tree (the backends in plugins/, the test fixtures) is
# built by this function. The plugin itself (a MODULE named <id>.so, hidden
# visibility, the version script that exports only the entry symbol, -z defs
# outside sanitizer builds) comes from tensorhost_add_plugin(), the very
# function the installed SDK gives third parties, so the two cannot drift
# apart. On top of it, what only the tree's own plugins get:
#   - the build tree's plugin folder as the default OUTPUT_DIR, where
#     tensorhost finds them by name as it would in an install;
#   - installation into that folder (unless NO_INSTALL), with a RUNPATH that
#     finds the libraries the install bundles in <prefix>/lib;
#   - the project's warnings (TensorhostWarnings.cmake).
include(${CMAKE_CURRENT_LIST_DIR}/TensorhostAddPlugin.cmake)

function(th_add_plugin)
  cmake_parse_arguments(P "NO_INSTALL" "NAME;OUTPUT_DIR" "SOURCES;LIBRARIES" ${ARGN})
  if(P_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "th_add_plugin: unknown arguments: ${P_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT P_OUTPUT_DIR)
    set(P_OUTPUT_DIR ${TH_PLUGIN_OUTPUT_DIR})
  endif()
  set(install_args "")
  if(NOT P_NO_INSTALL)
    set(install_args INSTALL_DESTINATION ${TH_PLUGIN_RELDIR})
  endif()
  tensorhost_add_plugin(NAME ${P_NAME} SOURCES ${P_SOURCES} LIBRARIES ${P_LIBRARIES}
    OUTPUT_DIR ${P_OUTPUT_DIR} ${install_args})
  set_target_properties(${P_NAME} PROPERTIES INSTALL_RPATH "$ORIGIN/../../")
  th_target_warnings(${P_NAME})
endfunction()
