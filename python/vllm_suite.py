from lab.vllm_suite import main

if __name__ == "__main__":
    main()
