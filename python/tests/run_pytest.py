"""Run the package's pytest suite (CTest's python.pytest): exit 77 when
this interpreter lacks pytest or NumPy (Debian: python3-pytest,
python3-numpy), else pytest's status."""
import sys

try:
    import numpy  # noqa: F401
    import pytest
except ImportError as e:
    print(f"run_pytest: {e}: skipped (install python3-pytest and python3-numpy)")
    sys.exit(77)

sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-o", "python_files=test_*.py",
                      "--ignore-glob=*test_gpu.py"] + sys.argv[1:]))
