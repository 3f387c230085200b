"""`python -m services.vault [--config FILE]`: the vault alone (production mode)."""

import sys

from cli.main import main

if __name__ == "__main__":
    sys.exit(main(["serve", "vault", *sys.argv[1:]]))
