/* placeholder */ typedef int th_placeholder_factor_io;
