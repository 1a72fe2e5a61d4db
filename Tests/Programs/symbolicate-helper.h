int symbolicate_null_deref(int *pointer);
