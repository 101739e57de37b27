"""`python -m jaxrl ...` is `python -m jaxrl.run ...`."""

from jaxrl.run import main

main()
