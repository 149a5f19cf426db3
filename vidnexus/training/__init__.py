"""Small models the project trains itself, on data it renders (DESIGN §10)."""
