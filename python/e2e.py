from lab.e2e import main

if __name__ == "__main__":
    main()
