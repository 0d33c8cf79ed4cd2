typedef int th_placeholder_toml;
