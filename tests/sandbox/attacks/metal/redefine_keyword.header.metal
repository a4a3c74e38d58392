// attack: #define const erases const so inputs can be written
#define const
