from scriptbuilder.cli.build import main

main()
