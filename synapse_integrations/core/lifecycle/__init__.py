"""What happens to memories over time: versions, salience, sleep, forgetting, repair."""
