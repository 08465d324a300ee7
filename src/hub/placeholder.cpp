// Placeholder until the hub client lands.
