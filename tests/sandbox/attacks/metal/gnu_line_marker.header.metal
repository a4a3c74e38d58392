// attack: a GNU line marker `# 1 "file"` does what #line does
# 1 "kport-entry"
struct S { int v; };
