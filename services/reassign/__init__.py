"""Moving a broker between containers (issue 26): the containers' side of a move."""
