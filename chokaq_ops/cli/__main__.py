"""`python -m chokaq_ops.cli ...` is the `chokaq` command, for processes started by this interpreter."""

from chokaq_ops.cli import main

raise SystemExit(main())
