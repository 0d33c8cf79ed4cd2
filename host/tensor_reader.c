/* placeholder */ typedef int th_placeholder_tensor_reader;
