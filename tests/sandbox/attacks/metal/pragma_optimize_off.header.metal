// attack: #pragma clang optimize off changes what the checks see
#pragma clang optimize off
