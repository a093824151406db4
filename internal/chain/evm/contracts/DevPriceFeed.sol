// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

/// @title DevPriceFeed: a USD price of the dev bundle's chains, read as Chainlink's are.
/// @notice It answers AggregatorV3Interface (decimals, description, version,
/// latestRoundData, getRoundData), so the service reads it with the code that reads a real
/// feed. Only its poster (the deployer, or whom it names) posts; each post opens a round
/// stamped with the block's time, as an aggregator's report is.
contract DevPriceFeed {
    struct Round {
        int256 answer;
        uint256 startedAt;
        uint256 updatedAt;
    }

    uint8 public immutable decimals;
    string public description;
    uint256 public constant version = 4;
    address public poster;
    uint80 public latestRound;
    mapping(uint80 => Round) private rounds;

    event AnswerUpdated(int256 indexed current, uint256 indexed roundId, uint256 updatedAt);

    constructor(uint8 decimals_, string memory description_, int256 answer, address poster_) {
        decimals = decimals_;
        description = description_;
        poster = poster_;
        _post(answer);
    }

    function post(int256 answer) external {
        require(msg.sender == poster, "DevPriceFeed: only the poster posts");
        _post(answer);
    }

    function latestRoundData()
        external
        view
        returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound)
    {
        return getRoundData(latestRound);
    }

    function getRoundData(uint80 roundId)
        public
        view
        returns (uint80, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound)
    {
        Round memory r = rounds[roundId];
        require(r.updatedAt != 0, "No data present");
        return (roundId, r.answer, r.startedAt, r.updatedAt, roundId);
    }

    function _post(int256 answer) private {
        require(answer > 0, "DevPriceFeed: a price is positive");
        latestRound += 1;
        rounds[latestRound] = Round(answer, block.timestamp, block.timestamp);
        emit AnswerUpdated(answer, latestRound, block.timestamp);
    }
}
