# Warning flags for C and C++ sources of the project (not for CUDA).
set(TH_C_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes
    -Wmissing-prototypes -Wformat=2 -Wvla -Wcast-qual -Wundef)
set(TH_CXX_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wformat=2)
if(TH_WERROR)
  list(APPEND TH_C_WARNINGS -Werror)
  list(APPEND TH_CXX_WARNINGS -Werror)
endif()

function(th_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:C>:${TH_C_WARNINGS}>
    $<$<COMPILE_LANGUAGE:CXX>:${TH_CXX_WARNINGS}>
    $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${TH_WERROR}>>:-Werror=all-warnings>)
endfunction()
