// attack: a macro hides the `}` that leaves the kernel body
#define LEAVE }
