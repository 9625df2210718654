"""Points the trellisc Python package at the build under test."""
import os
from pathlib import Path

BUILD = Path(os.environ.get("TRELLIS_BUILD_DIR",
                            Path(__file__).resolve().parents[2] / "build"))
os.environ["TRELLISC_BUILD_DIR"] = str(BUILD)  # the build under test
