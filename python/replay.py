from lab.replay import main

if __name__ == "__main__":
    main()
