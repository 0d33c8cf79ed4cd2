/* placeholder */ typedef int th_placeholder_plugin_loader;
