# tensorhost_add_plugin(NAME <id> SOURCES <src>...
#                       [LIBRARIES <lib>...]
#                       [OUTPUT_DIR <dir>]
#                       [INSTALL_DESTINATION <dir>])
#
# Shipped in the installed CMake package (find_package(tensorhost)) for
# plugins built outside the tensorhost tree; inside it, th_add_plugin()
# (TensorhostPlugin.cmake) builds every plugin through this same function.
#
# Builds <id>.so, a MODULE library (something only dlopen() loads, never
# linked against), so that:
#   - it is named exactly <id>.so: the host finds `plugin = "<id>"` as <id>.so;
#   - everything is compiled with hidden visibility and linked with a version
#     script, so the object exports exactly `tensorhost_plugin_entry` and
#     its internals cannot clash with the host's or another plugin's symbols;
#   - it is linked with -z defs, so a missing symbol fails the link instead
#     of a user's dlopen() later (except in -fsanitize builds, see below).
# INSTALL_DESTINATION, when given, installs the plugin there (for instance
# ${tensorhost_PLUGIN_DIR}, the folder the host searches by name).

# A version check, not cmake_minimum_required(): that would reset the
# policies of the project that includes this file.
if(CMAKE_VERSION VERSION_LESS 3.17)
  message(FATAL_ERROR "tensorhost_add_plugin needs CMake 3.17 or later "
                      "(CMAKE_CURRENT_FUNCTION_LIST_DIR)")
endif()

function(tensorhost_add_plugin)
  cmake_parse_arguments(P "" "NAME;OUTPUT_DIR;INSTALL_DESTINATION" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT P_NAME OR NOT P_SOURCES)
    message(FATAL_ERROR "tensorhost_add_plugin: NAME and SOURCES are required")
  endif()
  if(P_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "tensorhost_add_plugin: unknown arguments: ${P_UNPARSED_ARGUMENTS}")
  endif()

  add_library(${P_NAME} MODULE ${P_SOURCES})
  target_link_libraries(${P_NAME} PRIVATE tensorhost::plugin_api ${P_LIBRARIES})
  set_target_properties(${P_NAME} PROPERTIES
    PREFIX ""
    OUTPUT_NAME ${P_NAME}
    SUFFIX ".so"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(P_OUTPUT_DIR)
    set_target_properties(${P_NAME} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${P_OUTPUT_DIR})
  endif()
  # The map lies next to this file in the installed package.
  target_link_options(${P_NAME} PRIVATE
    "LINKER:--version-script=${CMAKE_CURRENT_FUNCTION_LIST_DIR}/plugin-exports.map")
  # A sanitized plugin leaves the sanitizer runtime's symbols to the program
  # that loads it (clang links that runtime into executables only), so -z defs
  # would fail it: skip the check when -fsanitize is in the flags, whether
  # they come from the CMAKE_*_FLAGS variables or from add_compile_options()
  # / add_link_options(), which the new target has inherited by now.
  get_target_property(compile_options ${P_NAME} COMPILE_OPTIONS)
  get_target_property(link_options ${P_NAME} LINK_OPTIONS)
  set(flags "${CMAKE_C_FLAGS} ${CMAKE_CXX_FLAGS} ${CMAKE_SHARED_LINKER_FLAGS}")
  string(APPEND flags " ${CMAKE_MODULE_LINKER_FLAGS} ${compile_options} ${link_options}")
  if(NOT "${flags}" MATCHES "-fsanitize=")
    target_link_options(${P_NAME} PRIVATE "LINKER:-z,defs")
  endif()
  set_property(TARGET ${P_NAME} APPEND PROPERTY
    LINK_DEPENDS ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/plugin-exports.map)
  if(P_INSTALL_DESTINATION)
    install(TARGETS ${P_NAME} LIBRARY DESTINATION ${P_INSTALL_DESTINATION})
  endif()
endfunction()
