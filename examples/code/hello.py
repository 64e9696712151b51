# Runs inside a fresh guest: `scripts/run code examples/code/hello.py`
import os
import platform
import sys

print(f"hello from a guest: uid {os.getuid()}, python {platform.python_version()}")
print(f"working directory {os.getcwd()}, hostname {platform.node()}")
print("stderr is separate", file=sys.stderr)
