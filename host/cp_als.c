/* placeholder */ typedef int th_placeholder_cp_als;
