from vidnexus.cli import main

main()
