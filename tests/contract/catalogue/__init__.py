"""Contract tests of the function catalogue (stores/catalogue/): functions and routing."""
