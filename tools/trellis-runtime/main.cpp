//===- main.cpp - The trellis runtime (trellis.exe) -----------------------===//
#include "trellis/Runtime/App.h"

int main(int argc, char **argv) { return trellis::runtimeMain(argc, argv); }
