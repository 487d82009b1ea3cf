from scriptbuilder.cli import main

main()
