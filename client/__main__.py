import sys

from dyno.client.cli import main

sys.exit(main())
