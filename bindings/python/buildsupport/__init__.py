"""What setup.py needs to build the C library and the detinfer command with
the repository's Makefile (not installed: the build runs these from the
source tree or from the sdist)."""
