"""`python -m kt`: the kt command line (the scripts of `kt compat install` run this)."""

from kt.cli import main

main()
