from lab.bench import main

if __name__ == "__main__":
    main()
