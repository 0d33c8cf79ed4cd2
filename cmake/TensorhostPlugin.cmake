# th_add_plugin(NAME <id> SOURCES ... [LIBRARIES ...] [OUTPUT_DIR dir] [NO_INSTALL])
#
# A tensorhost plugin: a MODULE library named <id>.so, compiled with hidden
# visibility and linked with a version script, so it exports exactly the entry
# symbol, and with -z defs, so a missing symbol fails the link, not dlopen().
set(TH_PLUGIN_VERSION_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/plugin-exports.map)

function(th_add_plugin)
  cmake_parse_arguments(P "NO_INSTALL" "NAME;OUTPUT_DIR" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT P_OUTPUT_DIR)
    set(P_OUTPUT_DIR ${TH_PLUGIN_OUTPUT_DIR})
  endif()
  add_library(${P_NAME} MODULE ${P_SOURCES})
  target_link_libraries(${P_NAME} PRIVATE tensorhost::plugin_api ${P_LIBRARIES})
  set_target_properties(${P_NAME} PROPERTIES
    PREFIX ""
    OUTPUT_NAME ${P_NAME}
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY ${P_OUTPUT_DIR}
    INSTALL_RPATH "$ORIGIN/../../")
  target_link_options(${P_NAME} PRIVATE
    "LINKER:--version-script=${TH_PLUGIN_VERSION_SCRIPT}")
  # Sanitized plugins leave the sanitizer runtime's symbols to the executable
  # (clang links that runtime statically into executables only), so -z defs
  # would fail them.
  if(NOT TH_SANITIZE)
    target_link_options(${P_NAME} PRIVATE "LINKER:-z,defs")
  endif()
  th_target_warnings(${P_NAME})
  if(NOT P_NO_INSTALL)
    install(TARGETS ${P_NAME} LIBRARY DESTINATION ${TH_PLUGIN_RELDIR})
  endif()
endfunction()
