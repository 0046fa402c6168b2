from nexusai.cli import main

main()
