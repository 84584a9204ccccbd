"""`python -m pytest_nl2sql …`: the `nl2sql` command."""

from pytest_nl2sql.cli import main

raise SystemExit(main())
