# Writes the bytes of IN as a C++ array (kCsdUpdateSpir) into OUT.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
file(WRITE ${OUT} "// Generated from csd_update.spir.bc; do not edit.\n"
  "extern const unsigned char kCsdUpdateSpir[] = {${body}};\n"
  "extern const unsigned long kCsdUpdateSpirSize = ${bytes};\n")
