import sys

from dyno.daemon.main import main

sys.exit(main())
