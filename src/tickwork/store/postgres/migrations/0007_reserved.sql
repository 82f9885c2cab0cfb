-- v7: reserved for another branch of this release (the lead drops this file at merge and
-- keeps that branch's 0007). Versions must run 1..n without gaps.
SELECT 1;
