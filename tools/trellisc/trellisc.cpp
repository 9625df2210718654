//===- trellisc.cpp - The trellisc compiler -------------------------------===//
#include "trellis/Compiler/Driver.h"

int main(int argc, char **argv) { return trellis::compilerMain(argc, argv); }
