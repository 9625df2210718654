"""The functional ops of trellisc, one file per op family."""
