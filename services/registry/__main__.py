"""`python -m services.registry [--config FILE]`: the registry alone (production mode)."""

import sys

from cli.main import main

if __name__ == "__main__":
    sys.exit(main(["serve", "registry", *sys.argv[1:]]))
