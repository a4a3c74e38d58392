// attack: thread_local state survives between threads
thread_local int calls = 0;
