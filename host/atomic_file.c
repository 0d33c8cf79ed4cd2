/* placeholder */ typedef int th_placeholder_atomic_file;
