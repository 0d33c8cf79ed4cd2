/* placeholder */ typedef int th_placeholder_config;
