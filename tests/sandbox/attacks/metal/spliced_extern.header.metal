// attack: ext\<newline>ern: a splice hides the extern keyword
ext\
ern "C" int system(const char*);
