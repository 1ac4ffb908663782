"""Bac's Java kernel: a Jupyter kernel around the JDK's JShell (`python -m bac_kernel.jshell`).

No Java kernel is packaged in Debian or on PyPI (IJava ships from GitHub only), and the
JDK's own JShell API does the hard part: `JShellHost.java` evaluates each cell snippet by
snippet and reports output, the last expression's value and errors as JSON lines; the
kernel in `__main__` speaks Jupyter's protocol through ipykernel.
"""
