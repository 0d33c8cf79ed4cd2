# Relocatable install: `cmake --install build --prefix P` gives a tree that
# runs on a host with the NVIDIA driver and nothing else of ours:
#
#   P/bin/tensorhost, tensorhost-synth, tensorhost-check-plugin  RPATH $ORIGIN/../lib
#   P/lib/libtensorhost.so.1                                     RPATH $ORIGIN
#   P/lib/tensorhost/plugins/*.so                                RUNPATH $ORIGIN/../../
#   P/lib/lib*.so*   the non-system shared libraries they need (GLib, GIO,
#                    GObject, GModule, json-glib, toml++, libffi, PCRE2, zlib,
#                    libmount, libblkid, libselinux, libgomp, ... as resolved)
#
# The executables and libtensorhost are linked with --disable-new-dtags so
# their search path is a DT_RPATH, which (unlike DT_RUNPATH) also applies to
# the dependencies of their dependencies: libgio's own libgmodule, libmount
# and libffi are then found in P/lib too, without LD_LIBRARY_PATH and
# without patching the copied libs (for the library, whatever program loads
# it: a Python interpreter, say).
#
# Not bundled: the C library family and the dynamic loader (they must match
# the host's kernel interface), libstdc++ and libgcc_s (every host that runs
# C++ has them, and a bundled older copy could shadow a newer one that the
# driver's libraries need), and the NVIDIA driver's libraries. libgomp is
# bundled: minimal images without a compiler often lack it.
option(TH_BUNDLE_RUNTIME_LIBS "Copy non-system shared libraries into the install tree" ON)

if(TH_BUNDLE_RUNTIME_LIBS)
  set(th_bundle_executables tensorhost tensorhost-synth tensorhost-check-plugin)
  foreach(exe IN LISTS th_bundle_executables ITEMS tensorhost_shared)
    target_link_options(${exe} PRIVATE "LINKER:--disable-new-dtags")
  endforeach()

  set(th_bundle_plugins cpu-reference)
  if(TH_HAVE_CUDA)
    list(APPEND th_bundle_plugins gpu-adaptive gpu-scheme1 gpu-scheme2)
  endif()

  # Paths as installed, evaluated at install time (DESTDIR and --prefix).
  set(th_bundle_exe_paths "")
  foreach(exe IN LISTS th_bundle_executables)
    list(APPEND th_bundle_exe_paths "\${th_root}/${CMAKE_INSTALL_BINDIR}/${exe}")
  endforeach()
  set(th_bundle_module_paths "\${th_root}/${CMAKE_INSTALL_LIBDIR}/libtensorhost.so.1")
  foreach(plugin IN LISTS th_bundle_plugins)
    list(APPEND th_bundle_module_paths "\${th_root}/${TH_PLUGIN_RELDIR}/${plugin}.so")
  endforeach()

  install(CODE "
    set(th_root \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}\")
    file(GET_RUNTIME_DEPENDENCIES
      EXECUTABLES ${th_bundle_exe_paths}
      MODULES ${th_bundle_module_paths}
      RESOLVED_DEPENDENCIES_VAR th_deps
      UNRESOLVED_DEPENDENCIES_VAR th_missing
      PRE_EXCLUDE_REGEXES
        [[^(ld-linux|linux-vdso|libc|libm|libdl|libpthread|librt|libresolv|libutil)[.-].*]]
        [[^(libstdc\\+\\+|libgcc_s)[.].*]]
        [[^(libcuda|libnvidia).*]]
      POST_EXCLUDE_REGEXES
        [[.*/(ld-linux[^/]*|libc[.]so[^/]*|libm[.]so[^/]*)$]])
    if(th_missing)
      message(FATAL_ERROR \"relocatable install: unresolved shared libraries: \${th_missing}\")
    endif()
    foreach(dep IN LISTS th_deps)
      # A reinstall resolves the plugins' deps through their RUNPATH to the
      # copies already in the tree: nothing to copy then.
      string(FIND \"\${dep}\" \"\${th_root}/\" th_at)
      if(th_at EQUAL 0)
        continue()
      endif()
      message(STATUS \"Bundling \${dep}\")
      file(INSTALL DESTINATION \"\${th_root}/${CMAKE_INSTALL_LIBDIR}\"
           TYPE SHARED_LIBRARY FOLLOW_SYMLINK_CHAIN FILES \"\${dep}\")
    endforeach()
  ")
endif()
