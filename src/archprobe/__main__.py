"""`python -m archprobe ...`: the same CLI as the `archprobe` command."""

from archprobe.cli.main import main

if __name__ == "__main__":
    main()
